export { createProgress, progressFlags, progressMode, writeLine, type ProgressDisplay, type ProgressMode } from './display.js';
export { formatBytes, formatDuration, plainLine, ProgressTracker, RateMeter, type ProgressInput, type ProgressSnapshot } from './meter.js';
