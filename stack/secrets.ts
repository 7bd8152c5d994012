/**
 * The stack's secrets (API token, agent token, PostgreSQL password): the value given in the
 * environment, else the one generated on the first start and kept in the data directory, so a
 * restarted stack keeps its tokens and can still open its database.
 */
import { randomBytes } from 'node:crypto'
import { readFile, writeFile } from 'node:fs/promises'

export async function loadOrCreateSecret (file: string, given: string | null = null): Promise<string> {
  if (given !== null) return given
  try {
    return (await readFile(file, 'utf8')).trim()
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
  }
  // base64url: safe in a URL (the database URL carries the password) and in a header.
  const secret = randomBytes(32).toString('base64url')
  await writeFile(file, `${secret}\n`, { mode: 0o600, flag: 'wx' })
  return secret
}
