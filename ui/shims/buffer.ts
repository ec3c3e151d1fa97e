// The generated protobuf code (proto/gen) uses Node's Buffer for bytes fields; in the
// browser the `buffer` package stands in: esbuild injects it where `Buffer` is named
// (hack/build-ui.ts), and ts-proto's JSON helpers, which read `globalThis.Buffer`, find it
// there too.
import { Buffer } from 'buffer';

const global = globalThis as { Buffer?: unknown };
global.Buffer ??= Buffer;

export { Buffer };
