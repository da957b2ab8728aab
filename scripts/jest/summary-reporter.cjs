// Prints one machine-readable line after the run, which CI parses:
//   tests: N passed, M failed[, K skipped]
// A test file that fails before any test runs (syntax error, failing import) counts as one failed
// test, so a broken run can never report "0 failed".
class SummaryReporter {
  onRunComplete(_contexts, results) {
    const brokenFiles = results.testResults.filter((file) => file.testExecError || (file.failureMessage && file.numFailingTests === 0)).length;
    const failed = results.numFailedTests + brokenFiles;
    const skipped = results.numPendingTests + results.numTodoTests;
    const line = `tests: ${results.numPassedTests} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`;
    process.stdout.write(`\n${line}\n`);
  }
}
module.exports = SummaryReporter;
