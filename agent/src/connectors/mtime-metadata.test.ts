import { formatMtime, keptMtime, mtimeMetadata, parseMtime } from './mtime-metadata.js';

// rclone's formats (backend/s3: swift.TimeToFloatString; backend/googlecloudstorage: RFC 3339 with
// gsutil's key; backend/azureblob: nine decimals). Round trips against the real rclone are in
// agent/test/conformance/rclone-mtime.test.ts.
describe('mtime metadata', () => {
  const t = new Date('2021-03-04T05:06:07.089Z');

  it("writes each rclone backend's format", () => {
    expect(formatMtime(t, 'seconds')).toBe('1614834367.089000000');
    expect(formatMtime(t, 'rfc3339')).toBe('2021-03-04T05:06:07.089Z');
    expect(formatMtime(t, 'rfc3339-nano9')).toBe('2021-03-04T05:06:07.089000000Z');
    expect(mtimeMetadata(t, 'rfc3339')).toEqual({ mtime: '2021-03-04T05:06:07.089Z', 'goog-reserved-file-mtime': '1614834367' });
    expect(mtimeMetadata(t, 'seconds')).toEqual({ mtime: '1614834367.089000000' });
  });

  it('reads every format back to the millisecond, truncating nanoseconds', () => {
    for (const value of ['1614834367.089000000', '1614834367.089999999', '1614834367.089', '2021-03-04T05:06:07.089Z', '2021-03-04T05:06:07.089999999Z', '2021-03-04T06:06:07.089+01:00']) {
      expect({ value, time: parseMtime(value)?.toISOString() }).toEqual({ value, time: t.toISOString() });
    }
    expect(parseMtime('1614834367')?.toISOString()).toBe('2021-03-04T05:06:07.000Z');
    expect(parseMtime('2021-03-04T05:06:07Z')?.toISOString()).toBe('2021-03-04T05:06:07.000Z');
  });

  it('ignores what is no time, and falls back to gsutil whole seconds', () => {
    for (const value of ['', 'yesterday', '1e9', '12.', '2021-03-04 05:06:07', '2021-13-45T99:99:99Z', '0x10']) expect(parseMtime(value)).toBeUndefined();
    expect(keptMtime(undefined)).toBeUndefined();
    expect(keptMtime({ other: '1' })).toBeUndefined();
    expect(keptMtime({ MTime: '1614834367.089' })?.toISOString()).toBe(t.toISOString());
    expect(keptMtime({ mtime: 'garbage', 'goog-reserved-file-mtime': '1614834367' })?.toISOString()).toBe('2021-03-04T05:06:07.000Z');
  });
});
