/**
 * Authenticated JSON requests to a stack's API, answered as they come (status, headers, body),
 * with nothing retried: what the dev stack uses to make its `default` network, and what the tests
 * and benchmarks use to drive a stack (test/helpers/launcher.ts passes it on).
 */
export interface ApiResponse<T> {
  status: number
  headers: Headers
  body: T
}

/** Authenticated JSON requests to a stack's API: `await api(stack).post('/v1/instances', {...})`. */
export function api (stack: { apiUrl: string, apiToken: string }) {
  async function request<T = any> (method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<ApiResponse<T>> {
    const response = await fetch(`${stack.apiUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${stack.apiToken}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000)
    })
    const text = await response.text()
    const isJson = /\bjson\b/.test(response.headers.get('content-type') ?? '')
    return { status: response.status, headers: response.headers, body: (isJson && text !== '' ? JSON.parse(text) : text) as T }
  }
  return {
    request,
    get: <T = any>(path: string) => request<T>('GET', path),
    post: <T = any>(path: string, body: unknown = {}, headers?: Record<string, string>) => request<T>('POST', path, body, headers),
    delete: <T = any>(path: string) => request<T>('DELETE', path)
  }
}
