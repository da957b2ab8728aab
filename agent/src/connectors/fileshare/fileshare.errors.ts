import type { ConnectorError, ConnectorErrorCode } from '../types.js';
import { networkMessages } from '../network-errors.js';
import { azureError, type AzureErrorContext } from '../azure/azure.errors.js';

/** File service error codes (Microsoft's "Azure Files error codes") over the common Azure Storage ones. */
const CODES: Record<string, ConnectorErrorCode> = {
  ShareNotFound: 'NOT_FOUND',
  ParentNotFound: 'NOT_FOUND',
  ShareDisabled: 'PERMISSION',
  ReadOnlyAttribute: 'PERMISSION',
  CannotDeleteFileOrDirectory: 'CONFLICT',
  DirectoryNotEmpty: 'CONFLICT',
  DeletePending: 'CONFLICT',
  ShareBeingDeleted: 'CONFLICT',
  ShareAlreadyExists: 'CONFLICT',
  InvalidRange: 'CONFLICT',
  InvalidFileOrDirectoryPathName: 'CONFLICT',
  // An SMB client holds the file open or locked: worth another attempt later.
  SharingViolation: 'TRANSIENT',
  FileLockConflict: 'TRANSIENT',
  ClientCacheFlushDelay: 'TRANSIENT',
};

const NETWORK = networkMessages('an Azure Files service', 'use a connection string with DefaultEndpointsProtocol=http');

/** What the error is about: the operation and path for messages, the share and endpoint to name. */
export interface FileshareErrorContext extends AzureErrorContext {
  share: string;
}

/**
 * An Azure SDK (or network) error as a ConnectorError whose message says what to fix: a missing
 * share is named with its endpoint, a refused key is AUTH, a refused operation PERMISSION.
 */
export function fileshareError(err: unknown, ctx: FileshareErrorContext): ConnectorError {
  return azureError(err, ctx, {
    codes: CODES,
    network: NETWORK,
    known: (name) => {
      if (name === 'ShareNotFound') return { code: 'NOT_FOUND', message: `share ${ctx.share} does not exist at ${ctx.where}` };
      if (name === 'ParentNotFound') return { code: 'NOT_FOUND', message: 'a parent directory does not exist' };
      return undefined;
    },
  });
}
