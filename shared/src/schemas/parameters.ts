import { Type, type Static } from '@sinclair/typebox';
import { Id, PageQuery, Timestamp } from './common.js';

/**
 * A parameter name (scope-areas.md "Global parameters"): a letter or `_`, then up to 63 letters,
 * digits or `_`. The control plane's template language (`{{params.NAME}}`) uses the same rule.
 */
export const PARAMETER_NAME_PATTERN = '^[A-Za-z_][A-Za-z0-9_]{0,63}$';
/** The longest value a parameter holds (it ends up inside a path). */
export const PARAMETER_VALUE_MAX_LENGTH = 4096;

/**
 * A global parameter as every read shows it. A secret one's value is never returned: `value` is
 * null and `has_value` true.
 */
export const Parameter = Type.Object({
  id: Id,
  name: Type.String(),
  value: Type.Union([Type.String(), Type.Null()]),
  secret: Type.Boolean(),
  has_value: Type.Boolean(),
  description: Type.Union([Type.String(), Type.Null()]),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Parameter = Static<typeof Parameter>;

/** `name`: the one parameter of that exact name (what the CLI looks a name up with). */
export const ListParametersQuery = Type.Composite(
  [PageQuery, Type.Object({ name: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })) })],
  { additionalProperties: false },
);
export type ListParametersQuery = Static<typeof ListParametersQuery>;

// The name's pattern is checked by the service, so that the 400 names the field and the rule.
const Name = Type.String({ minLength: 1, maxLength: 64 });
const Value = Type.String({ maxLength: PARAMETER_VALUE_MAX_LENGTH });
const Description = Type.Union([Type.String({ maxLength: 1000 }), Type.Null()]);

export const CreateParameterRequest = Type.Object(
  { name: Name, value: Value, secret: Type.Optional(Type.Boolean()), description: Type.Optional(Description) },
  { additionalProperties: false },
);
export type CreateParameterRequest = Static<typeof CreateParameterRequest>;

/**
 * Any of the fields. Turning a secret parameter into a plain one needs a new `value` (the sealed
 * one is never unsealed into a readable field).
 */
export const UpdateParameterRequest = Type.Object(
  {
    name: Type.Optional(Name), value: Type.Optional(Value), secret: Type.Optional(Type.Boolean()), description: Type.Optional(Description),
  },
  { additionalProperties: false },
);
export type UpdateParameterRequest = Static<typeof UpdateParameterRequest>;
