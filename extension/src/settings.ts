// What the server gets from the `cudaAgent` settings, and how secrets reach it.
//
// The server reads the `cudaAgent` section (initializationOptions and workspace/configuration) in
// the shape VS Code shows as `cudaAgent.executor.kind` and so on (server/settings.py). Secrets never
// travel in settings: the server's settings name an environment variable (`env:NAME`), and the
// extension sets that variable in the server's environment from SecretStorage.
//
// Where code and secrets go (ROUTES: the worker's and the LLM's URLs, the secrets' sources) is the
// user's choice, never a workspace's: package.json declares these settings machine-scoped and
// restricted in untrusted workspaces, and here they travel only in the section's `machine` object,
// built from the user's (or remote machine's) own values; a workspace's values, and any `machine`
// key a workspace wrote, are dropped. The server reads routes from `machine` only.

export const SECTION = "cudaAgent";

/** Settings only the extension reads; the server would report them as unknown. */
const CLIENT_ONLY_KEYS = ["python", "serverPackage", "trace", "unsafeNoIsolation"] as const;

export interface SecretSpec {
  /** Key in SecretStorage. */
  id: string;
  /** Environment variable of the server process that carries it. */
  env: string;
  /** Where the server's settings point at it: [group, key]. */
  setting: [string, string];
  /** Shown in the input box. */
  prompt: string;
}

export const WORKER_TOKEN: SecretSpec = {
  id: "cudaAgent.workerToken",
  env: "CUDA_AGENT_TOKEN",
  setting: ["executor", "token"],
  prompt: "Bearer token of the remote `cuda-agent worker` (stored in the editor's secret storage)",
};

export const LLM_API_KEY: SecretSpec = {
  id: "cudaAgent.llmApiKey",
  env: "OPENAI_API_KEY",
  setting: ["proposer", "apiKey"],
  prompt: "API key of the LLM endpoint (stored in the editor's secret storage)",
};

export const SECRETS: readonly SecretSpec[] = [WORKER_TOKEN, LLM_API_KEY];

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The settings that say where code and secrets go, by group: the server reads them from `machine` only. */
export const ROUTES: Readonly<Record<string, readonly string[]>> = {
  executor: ["url", "token", "rayAddress"],
  proposer: ["endpoint", "apiKey"],
};

/** The object of the section that holds the routes (server/settings.py `MACHINE`). */
export const MACHINE = "machine";

/** `env:NAME` or `file:PATH`: where a secret lives, as the server expects it. */
const SECRET_SOURCE = /^(env|file):./;

/**
 * The server's view of the `cudaAgent` section: the settings as plain JSON, without the
 * extension's own keys; the routes only in `machine`, from `userValue` (a setting's user- or
 * machine-level value, e.g. `cudaAgent.executor.url` → `inspect("executor.url").globalValue`),
 * never from `section` (which merges the workspace's values in); each secret pointing at its
 * environment variable — unless the user named another source (`env:NAME`, `file:PATH`).
 * Anything else there (a pasted secret) is dropped.
 */
export function serverSettings(section: unknown, userValue: (key: string) => unknown = () => undefined): Json {
  const settings: Json = isObject(section) ? JSON.parse(JSON.stringify(section)) : {};
  for (const key of [...CLIENT_ONLY_KEYS, MACHINE]) {
    delete settings[key];
  }
  const machine: Record<string, Json> = {};
  for (const [group, keys] of Object.entries(ROUTES)) {
    const merged = settings[group];
    const own: Json = {};
    for (const key of keys) {
      if (isObject(merged)) {
        delete merged[key];
      }
      const value = userValue(`${group}.${key}`);
      if (typeof value === "string" && value.trim() !== "") {
        own[key] = value;
      }
    }
    machine[group] = own;
  }
  for (const secret of SECRETS) {
    const [group, key] = secret.setting;
    const target = machine[group] ?? {};
    const own = target[key];
    target[key] = typeof own === "string" && SECRET_SOURCE.test(own) ? own : `env:${secret.env}`;
    machine[group] = target;
  }
  settings[MACHINE] = machine;
  return settings;
}

/** The server process's environment: the editor's, plus each secret the user stored. */
export function serverEnvironment(
  base: NodeJS.ProcessEnv,
  stored: ReadonlyMap<string, string | undefined>,
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...base };
  for (const secret of SECRETS) {
    const value = stored.get(secret.id);
    if (value) {
      env[secret.env] = value;
    }
  }
  return env;
}
