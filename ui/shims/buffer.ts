// The generated protobuf code (proto/gen) uses Node's Buffer for bytes fields; in the
// browser the `buffer` package stands in (esbuild injects it, hack/build-ui.ts).
export { Buffer } from 'buffer';
