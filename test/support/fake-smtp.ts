import { readFile } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import { SMTPServer, type SMTPServerSession } from 'smtp-server'
import type { TestCertificates } from './tls.ts'

/**
 * What the server does at one step of the dialogue. `refuse` answers with the code (and `text`
 * after it, e.g. an enhanced status code `4.7.0 Try again later`; by default words that echo the
 * addresses, as a real relay's do); `drop` closes the socket without a word; `hang` never answers;
 * `garble` (after data only) answers a line that is no SMTP reply and closes. At `after-data` the
 * whole message has been received first (so a drop or a hang there may hide an acceptance, as a
 * real relay's may).
 */
export type SmtpFault = { kind: 'refuse'; code: number; text?: string } | { kind: 'drop' } | { kind: 'hang' } | { kind: 'garble' }
export type SmtpStep = 'connect' | 'mail' | 'rcpt' | 'after-data'

/** A message the server read to the end, with how it answered. */
export type ReceivedMail = {
  from: string
  to: string[]
  raw: string
  answer: 'accepted' | 'refused' | 'dropped' | 'hung'
  /** Whether the session was inside TLS when the message came. */
  secure: boolean
  user: string | undefined
  /** When the server had read the message to the end (Date.now()): the outage benchmark's arrival time. */
  at: number
}

export type FakeSmtpOptions = {
  /** `none`: no STARTTLS offered; `starttls`: offered with the test certificate; `implicit`: TLS from the first byte. */
  tls?: 'none' | 'starttls' | 'implicit'
  certificates?: TestCertificates
  /** When set, AUTH is offered and only this user with this password gets through. */
  auth?: { user: string; pass: string }
}

/** A real SMTP server (smtp-server) on 127.0.0.1:0 that records what it is given and fails on demand. */
export async function startFakeSmtp(options: FakeSmtpOptions = {}) {
  const mode = options.tls ?? 'none'
  const received: ReceivedMail[] = []
  const authAttempts: { user: string | undefined; secure: boolean }[] = []
  const faults = new Map<SmtpStep, SmtpFault>()
  let sessions = 0
  const certificates = options.certificates
  const tlsFiles = mode === 'none' ? {} : { key: await readFile(certificates!.serverKey), cert: await readFile(certificates!.serverCert) }
  const disabled = [...(mode === 'starttls' ? [] : ['STARTTLS']), ...(options.auth ? [] : ['AUTH'])]

  const socketOf = (session: SMTPServerSession) => [...server.connections].find((connection) => connection.id === session.id)?._socket
  // Like a real relay's, a refusal echoes the addresses: a connector must never copy it anywhere.
  const refusal = (fault: { code: number; text?: string }, session: SMTPServerSession) =>
    Object.assign(new Error(fault.text ?? `<${session.envelope.rcptTo.map((rcpt) => rcpt.address).join(',')}> refused (${fault.code})`), {
      responseCode: fault.code,
    })
  /** Applies the fault of a step; true when it took over the answer. */
  const fault = (step: SmtpStep, session: SMTPServerSession, callback: (err?: Error | null) => void): boolean => {
    const current = faults.get(step)
    if (!current) return false
    if (current.kind === 'refuse') callback(refusal(current, session))
    else if (current.kind === 'drop') socketOf(session)?.destroy()
    else if (current.kind === 'garble') socketOf(session)?.end('HTTP/1.1 200 OK\r\n\r\n')
    return true
  }

  const server: SMTPServer = new SMTPServer({
    secure: mode === 'implicit',
    ...tlsFiles,
    disabledCommands: disabled,
    hideSTARTTLS: mode !== 'starttls',
    authOptional: !options.auth,
    authMethods: ['PLAIN', 'LOGIN'],
    logger: false,
    closeTimeout: 50,
    onConnect(session, callback) {
      sessions++
      if (!fault('connect', session, callback)) callback()
    },
    onAuth(auth, session, callback) {
      authAttempts.push({ user: auth.username, secure: session.secure })
      if (options.auth && auth.username === options.auth.user && auth.password === options.auth.pass)
        callback(null, { user: auth.username })
      else callback(Object.assign(new Error(`Invalid username or password for ${auth.username}`), { responseCode: 535 }))
    },
    onMailFrom(_address, session, callback) {
      if (!fault('mail', session, callback)) callback()
    },
    onRcptTo(address, session, callback) {
      const current = faults.get('rcpt')
      if (current?.kind === 'refuse')
        callback(
          Object.assign(new Error(current.text ?? `<${address.address}>: Recipient address rejected`), { responseCode: current.code }),
        )
      else if (!fault('rcpt', session, callback)) callback()
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = []
      stream.on('data', (chunk: Buffer) => chunks.push(chunk))
      stream.on('end', () => {
        const current = faults.get('after-data')
        const answer = !current
          ? 'accepted'
          : current.kind === 'refuse'
            ? 'refused'
            : current.kind === 'drop' || current.kind === 'garble'
              ? 'dropped'
              : 'hung'
        received.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((rcpt) => rcpt.address),
          raw: Buffer.concat(chunks).toString('utf8'),
          answer,
          secure: session.secure,
          user: typeof session.user === 'string' ? session.user : undefined,
          at: Date.now(),
        })
        if (!fault('after-data', session, callback)) callback()
      })
    },
  })
  server.on('error', () => {})
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.server.address() as AddressInfo

  return {
    port,
    received,
    authAttempts,
    /** Connections the server has seen (each greeted or faulted at connect). */
    sessions: () => sessions,
    /** The messages it accepted. */
    accepted: () => received.filter((mail) => mail.answer === 'accepted'),
    failAt(step: SmtpStep, how: SmtpFault) {
      faults.set(step, how)
    },
    resetFaults() {
      faults.clear()
    },
    /** Ends every session (hung ones too) and stops listening. */
    close: () =>
      new Promise<void>((resolve) => {
        for (const connection of server.connections) connection._socket.destroy()
        server.close(() => resolve())
      }),
  }
}

export type FakeSmtp = Awaited<ReturnType<typeof startFakeSmtp>>
