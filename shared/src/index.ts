export * from './scopes.js';
export * from './messages.js';
export * from './schemas/common.js';
export * from './schemas/auth.js';
export * from './schemas/api-keys.js';
export * from './schemas/users.js';
export * from './schemas/activity.js';
