/** Summaries of measured samples. */

/** The p-th percentile (0–100) by the nearest-rank method; NaN for no samples. */
export function percentile (samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN
  const sorted = [...samples].sort((a, b) => a - b)
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length))
  return sorted[rank - 1]
}

export function round (value: number, digits = 1): number {
  const factor = 10 ** digits
  return Math.round(value * factor) / factor
}
