/**
 * What the local phone-provider fakes (Twilio, the WhatsApp Cloud API) accepted, for the phone
 * inbox view of `npm start` and for tests: in memory only, newest last, bounded. Development
 * only: it holds codes in the clear, as the SES emulator's inbox does.
 */
export type PhoneInboxEntry = {
  provider: 'twilio' | 'whatsapp_cloud'
  /** The E.164 number the message went to. */
  to: string
  /** The text a phone shows (for a WhatsApp template: its body with the parameters filled in). */
  text: string
  providerMessageId: string
  at: Date
}

export type PhoneInbox = {
  record(entry: PhoneInboxEntry): void
  list(): readonly PhoneInboxEntry[]
}

export function createPhoneInbox(limit = 500): PhoneInbox {
  const entries: PhoneInboxEntry[] = []
  return {
    record(entry) {
      entries.push(entry)
      if (entries.length > limit) entries.splice(0, entries.length - limit)
    },
    list: () => entries,
  }
}
