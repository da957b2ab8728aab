/**
 * @xfer/storage: the storage plumbing written once for the agent's connectors and the control
 * plane's file store (issue 13). Its pieces arrive with the connectors that move onto them.
 */
export {};
