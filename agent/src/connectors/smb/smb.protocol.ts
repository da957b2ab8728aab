/** SMB2/3 wire constants (MS-SMB2 2.2) the client uses, and the NTSTATUS values it acts on. */

export const Command = {
  NEGOTIATE: 0x00,
  SESSION_SETUP: 0x01,
  LOGOFF: 0x02,
  TREE_CONNECT: 0x03,
  CREATE: 0x05,
  CLOSE: 0x06,
  FLUSH: 0x07,
  READ: 0x08,
  WRITE: 0x09,
  QUERY_DIRECTORY: 0x0e,
  SET_INFO: 0x11,
} as const;

export const COMMAND_NAMES: Record<number, string> = Object.fromEntries(Object.entries(Command).map(([k, v]) => [v, k]));

export const HEADER_BYTES = 64;
export const PROTOCOL_ID = Buffer.from([0xfe, 0x53, 0x4d, 0x42]);
/** What a client receives as the first bytes of an SMB 1 or encrypted (SMB3 transform) message. */
export const TRANSFORM_ID = Buffer.from([0xfd, 0x53, 0x4d, 0x42]);

export const Flags = { SERVER_TO_REDIR: 0x1, ASYNC: 0x2, RELATED: 0x4, SIGNED: 0x8 } as const;

export const Dialect = { SMB202: 0x0202, SMB21: 0x0210, SMB30: 0x0300, SMB302: 0x0302, SMB311: 0x0311 } as const;
export const OFFERED_DIALECTS = [Dialect.SMB202, Dialect.SMB21, Dialect.SMB30, Dialect.SMB302, Dialect.SMB311];

/** SMB 3.1.1 negotiate contexts (MS-SMB2 2.2.3.1) and the algorithms the client offers in them. */
export const NegotiateContext = { PREAUTH_INTEGRITY: 1, SIGNING: 8 } as const;
export const HASH_SHA512 = 1;
export const SigningAlgorithmId = { HMAC_SHA256: 0, AES_CMAC: 1, AES_GMAC: 2 } as const;

export const SecurityMode = { SIGNING_ENABLED: 0x1, SIGNING_REQUIRED: 0x2 } as const;
export const Capability = { DFS: 0x1, LEASING: 0x2, LARGE_MTU: 0x4, ENCRYPTION: 0x40 } as const;
export const SessionFlag = { IS_GUEST: 0x1, IS_NULL: 0x2, ENCRYPT_DATA: 0x4 } as const;
export const ShareFlag = { ENCRYPT_DATA: 0x8 } as const;

export const Access = {
  READ_DATA: 0x1,
  LIST_DIRECTORY: 0x1,
  WRITE_DATA: 0x2,
  APPEND_DATA: 0x4,
  READ_ATTRIBUTES: 0x80,
  WRITE_ATTRIBUTES: 0x100,
  DELETE: 0x10000,
  READ_CONTROL: 0x20000,
  SYNCHRONIZE: 0x100000,
} as const;
export const Share = { READ: 0x1, WRITE: 0x2, DELETE: 0x4, ALL: 0x7 } as const;
export const Disposition = { OPEN: 1, CREATE: 2, OPEN_IF: 3, OVERWRITE_IF: 5 } as const;
export const CreateOption = { DIRECTORY_FILE: 0x1, NON_DIRECTORY_FILE: 0x40, SYNCHRONOUS_IO_NONALERT: 0x20 } as const;
export const FileAttribute = { DIRECTORY: 0x10, NORMAL: 0x80, REPARSE_POINT: 0x400 } as const;

export const InfoClass = { FILE_DIRECTORY_INFORMATION: 0x01, FILE_BASIC_INFORMATION: 4, FILE_RENAME_INFORMATION: 10, FILE_DISPOSITION_INFORMATION: 13 } as const;

export const Status = {
  SUCCESS: 0x00000000,
  PENDING: 0x00000103,
  BUFFER_OVERFLOW: 0x80000005,
  NO_MORE_FILES: 0x80000006,
  INVALID_PARAMETER: 0xc000000d,
  NO_SUCH_FILE: 0xc000000f,
  END_OF_FILE: 0xc0000011,
  MORE_PROCESSING_REQUIRED: 0xc0000016,
  ACCESS_DENIED: 0xc0000022,
  OBJECT_NAME_INVALID: 0xc0000033,
  OBJECT_NAME_NOT_FOUND: 0xc0000034,
  OBJECT_NAME_COLLISION: 0xc0000035,
  OBJECT_PATH_NOT_FOUND: 0xc000003a,
  OBJECT_PATH_SYNTAX_BAD: 0xc000003b,
  SHARING_VIOLATION: 0xc0000043,
  QUOTA_EXCEEDED: 0xc0000044,
  DELETE_PENDING: 0xc0000056,
  WRONG_PASSWORD: 0xc000006a,
  LOGON_FAILURE: 0xc000006d,
  ACCOUNT_RESTRICTION: 0xc000006e,
  INVALID_LOGON_HOURS: 0xc000006f,
  PASSWORD_EXPIRED: 0xc0000071,
  ACCOUNT_DISABLED: 0xc0000072,
  DISK_FULL: 0xc000007f,
  INSUFFICIENT_RESOURCES: 0xc000009a,
  MEDIA_WRITE_PROTECTED: 0xc00000a2,
  FILE_IS_A_DIRECTORY: 0xc00000ba,
  NOT_SUPPORTED: 0xc00000bb,
  NETWORK_NAME_DELETED: 0xc00000c9,
  BAD_NETWORK_NAME: 0xc00000cc,
  REQUEST_NOT_ACCEPTED: 0xc00000d0,
  NOT_SAME_DEVICE: 0xc00000d4,
  DIRECTORY_NOT_EMPTY: 0xc0000101,
  NOT_A_DIRECTORY: 0xc0000103,
  CANCELLED: 0xc0000120,
  FILE_CLOSED: 0xc0000128,
  USER_SESSION_DELETED: 0xc0000203,
  PASSWORD_MUST_CHANGE: 0xc0000224,
  ACCOUNT_LOCKED_OUT: 0xc0000234,
  NETWORK_SESSION_EXPIRED: 0xc000035c,
} as const;

export const STATUS_NAMES: Record<number, string> = Object.fromEntries(Object.entries(Status).map(([k, v]) => [v, `STATUS_${k}`]));

/** `STATUS_ACCESS_DENIED`, or the hex value of a status this table does not name. */
export function statusName(status: number): string {
  return STATUS_NAMES[status] ?? `NTSTATUS 0x${status.toString(16).padStart(8, '0')}`;
}

export function dialectName(dialect: number): string {
  const patch = dialect & 0xf;
  return `SMB ${dialect >> 8}.${(dialect >> 4) & 0xf}${patch ? `.${patch}` : ''}`;
}

/** Converts a Windows FILETIME (100 ns ticks since 1601) to a Date; undefined for 0. */
export function fromFileTime(ticks: bigint): Date | undefined {
  if (ticks === 0n) return undefined;
  return new Date(Number(ticks / 10_000n - 11_644_473_600_000n));
}

/** Converts a Date to a Windows FILETIME (100 ns ticks since 1601). */
export function toFileTime(time: Date): bigint {
  return (BigInt(time.getTime()) + 11_644_473_600_000n) * 10_000n;
}

/** An SMB2 error status of a command, as the server answered it. */
export class SmbStatusError extends Error {
  constructor(
    readonly status: number,
    readonly command: number,
  ) {
    super(`${COMMAND_NAMES[command] ?? `command ${command}`} failed: ${statusName(status)}`);
    this.name = 'SmbStatusError';
  }
}
