/**
 * The EICAR anti-malware test file (eicar.org): 68 harmless bytes every scanner reports as a virus.
 * Assembled at run time from pieces so that no file in the repository contains it whole (scanners
 * on developer machines would quarantine such a file). Write it nowhere but into a test's scan.
 */
export function eicar(): Buffer {
  const pieces = ['X5O!P%@AP[4\\PZX54(P^)7CC)7}$', 'EICAR-STANDARD-', 'ANTIVIRUS-', 'TEST-FILE!$H+H*'];
  return Buffer.from(pieces.join(''), 'latin1');
}
