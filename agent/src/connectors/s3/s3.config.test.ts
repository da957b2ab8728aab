import type { ConnectionSettings } from '@xfer/shared';
import { ConnectorError } from '../types.js';
import { DEFAULT_S3_TUNING, s3Target } from './s3.config.js';

const keys = { access_key_id: 'AKIDEXAMPLE', secret_access_key: 'secret' };

function target(over: Partial<ConnectionSettings>) {
  return s3Target({ id: '1', name: 'n', type: 's3', host: null, port: 443, path: '/bucket', options: {}, agent_id: null, credentials: keys, ...over }, DEFAULT_S3_TUNING);
}

describe('s3Target: endpoints, addressing, regions and quirks per type', () => {
  it('s3 without a host is AWS: regional endpoint from the SDK, virtual-hosted, us-east-1 by default', () => {
    const t = target({});
    expect(t.clientConfig).toMatchObject({ endpoint: undefined, forcePathStyle: false, region: 'us-east-1', requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' });
    expect(t.where).toBe('AWS S3 (us-east-1)');
    expect(t.quirks).toEqual({ sha256: true, partChecksum: 'crc32', batchDelete: true, mtimeFormat: 'seconds' });
    expect(target({ credentials: { ...keys, region: 'eu-west-3' } }).clientConfig.region).toBe('eu-west-3');
  });

  it('s3 with a DNS host keeps virtual-hosted addressing unless force_path_style; the port shows when not the default', () => {
    expect(target({ host: 's3.example.com', port: 9000 }).clientConfig).toMatchObject({ endpoint: 'https://s3.example.com:9000', forcePathStyle: false });
    expect(target({ host: 's3.example.com', options: { force_path_style: true } }).clientConfig).toMatchObject({ endpoint: 'https://s3.example.com', forcePathStyle: true });
  });

  it('s3 on an IP address or a single-label host is path-style (bucket.host cannot resolve)', () => {
    expect(target({ host: '10.0.0.5', port: 80, options: { secure: false } }).clientConfig).toMatchObject({ endpoint: 'http://10.0.0.5', forcePathStyle: true });
    expect(target({ host: 'minio', port: 9000, options: { secure: false } }).clientConfig).toMatchObject({ endpoint: 'http://minio:9000', forcePathStyle: true });
    expect(target({ host: '::1', port: 9000 }).clientConfig).toMatchObject({ endpoint: 'https://[::1]:9000', forcePathStyle: true });
  });

  it('r2: the account endpoint when no host, region auto, path-style, MD5 only', () => {
    const t = target({ type: 'r2', credentials: { ...keys, account_id: 'abc123' } });
    expect(t.clientConfig).toMatchObject({ endpoint: 'https://abc123.r2.cloudflarestorage.com', region: 'auto', forcePathStyle: true, responseChecksumValidation: 'WHEN_REQUIRED' });
    expect(t.quirks).toEqual({ sha256: false, partChecksum: 'md5', batchDelete: true, mtimeFormat: 'seconds' });
    expect(() => target({ type: 'r2' })).toThrow(ConnectorError);
  });

  it('gcs: storage.googleapis.com, region auto, no SDK checksums, no multi-object delete', () => {
    const t = target({ type: 'gcs' });
    expect(t.clientConfig).toMatchObject({ endpoint: 'https://storage.googleapis.com', region: 'auto', forcePathStyle: true, requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' });
    expect(t.quirks).toEqual({ sha256: false, partChecksum: 'md5', batchDelete: false, mtimeFormat: 'rfc3339' });
  });

  it('the path is /<bucket>[/<prefix>]', () => {
    expect(target({ path: '/b' })).toMatchObject({ bucket: 'b', prefix: '' });
    expect(target({ path: '/b/in/coming/' })).toMatchObject({ bucket: 'b', prefix: 'in/coming' });
    expect(() => target({ path: '/' })).toThrow(/must name a bucket/);
  });

  it('ignores endpoint settings of the agent host environment', () => {
    expect(target({}).clientConfig.ignoreConfiguredEndpointUrls).toBe(true);
  });
});
