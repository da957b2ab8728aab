/**
 * @xfer/storage: the storage plumbing written once for the agent's connectors and the control
 * plane's file store (issue 13): the bounded in-flight window, the write guard, the part reader
 * and the S3 multipart uploader.
 */
export * from './inflight-window.js';
export * from './write-guard.js';
export * from './part-reader.js';
export * from './s3-multipart.js';
