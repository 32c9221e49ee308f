import { expect } from 'chai'
import { createHash } from 'node:crypto'
import { rangeLists, rangeQuery } from '../src/identity/breached-passwords.ts'
import { acceptNewPassword, passwordCharacters, type BreachOutcome } from '../src/identity/password-policy.ts'

describe('the password policy', () => {
  it('counts characters as a person does: code points after NFC, a run of whitespace once', () => {
    const cases: [string, number][] = [
      ['correct horse', 13],
      ['e\u0301'.repeat(6), 6],
      ['é'.repeat(6), 6],
      ['🦄'.repeat(12), 12],
      ['a    b', 3],
      ['a\t\t\nb', 3],
      ['', 0],
    ]
    for (const [password, characters] of cases) expect(passwordCharacters(password), JSON.stringify(password)).to.equal(characters)
  })

  it('refuses fewer than 12 characters before asking the breach check, and a breached password after it', async () => {
    const asked: string[] = []
    const check = (outcome: BreachOutcome) => async (password: string) => {
      asked.push(password)
      return outcome
    }
    const refusal = async (password: string, outcome: BreachOutcome) =>
      await acceptNewPassword(password, check(outcome)).then(
        () => 'accepted',
        (error: { code: string }) => error.code,
      )
    expect(await refusal('elevenchars', 'clean')).to.equal('weak_password')
    expect(asked, 'a short password is never looked up').to.deep.equal([])
    expect(await refusal('twelve chars', 'breached')).to.equal('breached_password')
    expect(await refusal('twelve chars', 'clean')).to.equal('accepted')
    expect(await refusal('twelve chars', 'unavailable'), 'fail-open').to.equal('accepted')
    expect(await acceptNewPassword('twelve chars'), 'no check configured').to.equal('twelve chars')
  })
})

describe('the Pwned Passwords range query', () => {
  const hash = createHash('sha1').update('password', 'utf8').digest('hex').toUpperCase()

  it('splits the SHA-1 of the UTF-8 password into a 5-hex prefix to send and a 35-hex suffix to look for', () => {
    expect(rangeQuery('password')).to.deep.equal({ prefix: hash.slice(0, 5), suffix: hash.slice(5) })
    expect(rangeQuery('password').prefix).to.equal('5BAA6')
  })

  it('finds the suffix only with a count above zero, whatever the case and line ending', () => {
    const suffix = hash.slice(5)
    const cases: [string, boolean][] = [
      [`0018A45C4D1DEF81644B54AB7F969B88D65:1\r\n${suffix}:9545824\r\n`, true],
      [`${suffix.toLowerCase()}:3`, true],
      [`${suffix}:0\r\n0018A45C4D1DEF81644B54AB7F969B88D65:1`, false],
      ['0018A45C4D1DEF81644B54AB7F969B88D65:1', false],
      [`${suffix}`, false],
      ['', false],
    ]
    for (const [body, listed] of cases) expect(rangeLists(body, suffix), body.slice(0, 50)).to.equal(listed)
  })
})
