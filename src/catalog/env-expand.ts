// `${VAR}` and `${VAR:-default}` in file catalogs, so a local run can point upstreams at the
// simulator's address without editing the file. Kubernetes catalogs are never expanded.

export interface ExpandResult {
  text: string;
  /** Variables referenced without a default and not set, with the 1-based line of each reference. */
  missing: { name: string; line: number }[];
}

const REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/** Expands references; an unset (or empty) variable takes its default, or is reported as missing. */
export function expandEnv(text: string, env: NodeJS.ProcessEnv): ExpandResult {
  const missing: ExpandResult['missing'] = [];
  const expanded = text.replace(REFERENCE, (_match, name: string, fallback: string | undefined, offset: number) => {
    const value = env[name];
    if (value !== undefined && value !== '') return value;
    if (fallback !== undefined) return fallback;
    missing.push({ name, line: text.slice(0, offset).split('\n').length });
    return '';
  });
  return { text: expanded, missing };
}
