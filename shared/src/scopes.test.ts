import { SCOPES, scopesForRole } from './scopes.js';

describe('scopesForRole', () => {
  it('gives a viewer only the :read scopes', () => {
    const scopes = scopesForRole('viewer');
    expect(scopes.length).toBeGreaterThan(0);
    expect(scopes.every((s) => s.endsWith(':read'))).toBe(true);
    expect(scopes).toEqual(SCOPES.filter((s) => s.endsWith(':read')));
  });

  it('gives a member everything but user and API key management', () => {
    const scopes = scopesForRole('member');
    expect(scopes.some((s) => s.startsWith('users:') || s.startsWith('api-keys:'))).toBe(false);
    expect(scopes).toEqual(expect.arrayContaining(['files:write', 'transfers:write', 'connections:read']));
  });

  it('gives an owner every scope', () => {
    expect(new Set(scopesForRole('owner'))).toEqual(new Set(SCOPES));
  });
});
