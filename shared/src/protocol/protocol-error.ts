/** A frame that breaks the agent protocol (either direction): the session closes with `CloseCodes.protocolError`. */
export class ProtocolError extends Error {}
