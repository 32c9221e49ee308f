import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'

/** Development only: the aws-ses-v2-local emulator in this process, with its inbox viewer at `/`. */
export async function startSesEmulator(port: number): Promise<{ url: string; stop: () => Promise<void> }> {
  // A dev dependency: imported here only, so production installs never load it.
  // CommonJS with `exports.default`: Node's import() hands us module.exports as `default`.
  const { default: emulator } = await import('aws-ses-v2-local')
  const http: Server = await emulator.default({ host: '127.0.0.1', port })
  const address = http.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${address.port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections()
        http.close(() => resolve())
      }),
  }
}
