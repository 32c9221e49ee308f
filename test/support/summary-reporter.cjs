// Mocha's spec reporter plus one plain closing line, "N passed, N failed", that CI tooling reads.
const { reporters } = require('mocha')

class SpecWithSummary extends reporters.Spec {
  constructor(runner, options) {
    super(runner, options)
    runner.once('end', () => {
      const { passes, failures, pending } = runner.stats
      console.log(`${passes} passed, ${failures} failed${pending ? `, ${pending} skipped` : ''}`)
    })
  }
}

module.exports = SpecWithSummary
