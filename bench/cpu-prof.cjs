// Preloaded with `node --require` (NODE_OPTIONS refuses --cpu-prof): records a V8 CPU profile of
// the whole process and writes it to $XFER_BENCH_CPU_PROF_DIR/<pid>.cpuprofile at exit.
const { Session } = require('node:inspector');
const { writeFileSync } = require('node:fs');
const { join } = require('node:path');

const dir = process.env.XFER_BENCH_CPU_PROF_DIR;
if (dir) {
  const session = new Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.start');
  // The same-thread inspector session answers synchronously, so this works in an exit handler.
  process.on('exit', () => {
    session.post('Profiler.stop', (err, result) => {
      if (!err) writeFileSync(join(dir, `${process.pid}.cpuprofile`), JSON.stringify(result.profile));
    });
  });
}
