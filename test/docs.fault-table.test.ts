import { expect } from 'chai'
import { readFile } from 'node:fs/promises'
import { FAULT_TABLE_MARKERS, faultTableDoc, withFaultTable } from '../src/providers/fault-doc.ts'
import { FAULT_CASES, FAULTS } from '../src/providers/faults.ts'

describe('docs/delivery.md "Fault table"', () => {
  it('is what src/providers/faults.ts and the providers’ answers generate (run npm run docs:faults after changing them)', async () => {
    const page = await readFile('docs/delivery.md', 'utf8')
    expect(page).to.equal(withFaultTable(page))
    expect(page.split(FAULT_TABLE_MARKERS.start)).to.have.length(2, 'the table is stated once')
  })

  it('names every row and every case of the code’s table', () => {
    const doc = faultTableDoc()
    for (const row of Object.keys(FAULTS)) expect(doc).to.match(new RegExp(`^\\| \`${row}\` \\|`, 'm'))
    for (const { answer } of Object.values(FAULT_CASES)) expect(doc).to.include(`| ${answer.replaceAll('|', '\\|')} |`)
  })
})
