/** Something drawn in place on stderr that lines must be written above. */
export interface LiveView {
  interject(line: string): void;
}

let current: LiveView | undefined;

/** Registers the view on screen; `undefined` clears it, only if `owner` is still the one registered. */
export function setLive(view: LiveView | undefined, owner?: LiveView): void {
  if (view || current === owner) current = view;
}

/**
 * A line for people on stderr (a warning, a notice) that does not tear the live view: ink redraws
 * by erasing the lines it drew last, so a line written behind its back would be half erased.
 * While a view is up, the line is printed above it by ink itself.
 */
export function writeLine(line: string, stream: NodeJS.WriteStream = process.stderr): void {
  if (current) current.interject(line);
  else stream.write(line + '\n');
}
