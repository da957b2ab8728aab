import type { ConnectorError, ConnectorErrorCode } from '../types.js';
import { networkMessages } from '../network-errors.js';
import { azureError, type AzureErrorContext, type AzureErrorSpec } from '../azure/azure.errors.js';

/** Blob service error codes over the common Azure Storage ones (azure/azure.errors.ts). */
const CODES: Record<string, ConnectorErrorCode> = {
  BlobNotFound: 'NOT_FOUND',
  ContainerNotFound: 'NOT_FOUND',
  BlobArchived: 'PERMISSION',
  BlobImmutableDueToPolicy: 'PERMISSION',
  LeaseIdMissing: 'CONFLICT',
  LeaseIdMismatchWithBlobOperation: 'CONFLICT',
  BlobAlreadyExists: 'CONFLICT',
  ContainerBeingDeleted: 'CONFLICT',
  InvalidBlobOrBlock: 'CONFLICT',
  InvalidBlockList: 'CONFLICT',
};

const NETWORK = networkMessages('a Blob service', 'use a connection string with DefaultEndpointsProtocol=http');

/** What the error is about: the operation and path for messages, the container and endpoint to name. */
export interface BlobErrorContext extends AzureErrorContext {
  container: string;
}

/**
 * An Azure SDK (or network) error as a ConnectorError whose message says what to fix: a missing
 * container or account is named, a refused key is AUTH, a refused operation PERMISSION.
 */
export function blobError(err: unknown, ctx: BlobErrorContext): ConnectorError {
  const spec: AzureErrorSpec = {
    codes: CODES,
    network: NETWORK,
    known: (name, e) => {
      if (name === 'ContainerNotFound') return { code: 'NOT_FOUND', message: `container ${ctx.container} does not exist at ${ctx.where}` };
      if (name === 'ResourceNotFound') return { code: 'NOT_FOUND', message: `the account or container ${ctx.container} does not exist at ${ctx.where}` };
      // Azurite answers a Content-MD5 that does not match the body with a generic 400.
      if (e.statusCode === 400 && /md5/i.test(e.message ?? '')) return { code: 'TRANSIENT', message: 'the service refused the bytes sent (Content-MD5 mismatch)' };
      return undefined;
    },
  };
  return azureError(err, ctx, spec);
}
