// Monthly caps run by calendar month in UTC: "2026-11" for any instant of November 2026, UTC.
export function utcMonth(now: number): string {
  const d = new Date(now);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth() + 1;
  return `${y}-${m < 10 ? '0' : ''}${m}`;
}
