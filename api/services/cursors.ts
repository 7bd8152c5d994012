/**
 * The cursors of the API's pages: the position (a sequence number or row ID) of the last row of
 * the previous page, opaque to clients.
 */
import { ApiProblem } from '../plugins/problem-details.js'

export function encodeCursor (position: number): string {
  return Buffer.from(String(position)).toString('base64url')
}

export function decodeCursor (cursor: string): number {
  const position = Number(Buffer.from(cursor, 'base64url').toString())
  if (Number.isSafeInteger(position) && position > 0) return position
  throw new ApiProblem(400, 'Bad Request', 'query.cursor: is not a cursor this API returned', [{ path: 'query.cursor', message: 'is not a cursor this API returned' }])
}
