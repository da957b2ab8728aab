#!/usr/bin/env node
/** xfer: the command-line interface. oclif finds the commands through the `oclif` section of package.json. */
import { execute } from '@oclif/core';

await execute({ dir: import.meta.url });
