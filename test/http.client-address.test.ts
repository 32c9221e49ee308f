import { expect } from 'chai'
import { clientOf } from '../src/http/client-address.ts'

describe('the client a per-client limit counts', () => {
  it('is an IPv6 address as its /64, however the address is spelled', () => {
    for (const spelling of [
      '2001:db8:7:1::1',
      '2001:DB8:7:1:ffff::9',
      '2001:0db8:0007:0001:0000:0000:0000:0001',
      '[2001:db8:7:1::2]:443',
      ' 2001:db8:7:1::3 ',
    ]) {
      expect(clientOf(spelling), spelling).to.equal('2001:db8:7:1:0:0:0:0/64')
    }
    expect(clientOf('2001:db8:7:2::1')).to.equal('2001:db8:7:2:0:0:0:0/64')
    expect(clientOf('fe80::1%eth0')).to.equal(clientOf('fe80::2'))
    expect(clientOf('2001:db8::1.2.3.4')).to.equal('2001:db8:0:0:0:0:0:0/64')
  })

  it('is an IPv4 address as it is, however an IPv6 address carries it', () => {
    for (const spelling of [
      '198.51.100.7',
      '198.51.100.7:40001',
      '::ffff:198.51.100.7',
      '::FFFF:c633:6407',
      '::ffff:0:198.51.100.7',
      '64:ff9b::198.51.100.7',
      '64:ff9b::c633:6407',
      '2001:0:4136:e378:8000:63bf:39cc:9bf8',
      '2002:c633:6407:1::1',
    ]) {
      expect(clientOf(spelling), spelling).to.equal('198.51.100.7')
    }
  })

  it('is nothing for text that is no IP address, including IPv4 spellings other than dotted decimal', () => {
    for (const text of ['unknown', '010.1.1.1', '198.51.100.08', '3325256711', '0xc6336407', '1.2.3', '2001:db8::/64', '']) {
      expect(clientOf(text), text).to.equal(undefined)
    }
  })
})
