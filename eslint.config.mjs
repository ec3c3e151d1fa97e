// Lint rules that keep the planes apart and the code honest (see docs/design.md, "Three planes").
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';

const planes = ['operator', 'state', 'harness'];
// A plane imports common/ and proto/ only, never another plane.
const planeZones = planes.flatMap((target) =>
  planes
    .filter((from) => from !== target)
    .map((from) => ({
      target: `./${target}`,
      from: `./${from}`,
      message: `${target}/ must not import ${from}/: planes talk over gRPC or HTTP; share code through common/ or proto/.`,
    })),
);
// Pure cores never import I/O folders or modules.
const pureZones = [
  { target: './common', from: ['./operator', './state', './harness', './hack', './test', './cli'] },
  {
    // The forensics UI runs in the browser: the project's pure code only (docs/ui.md).
    target: './ui',
    from: ['./operator', './harness', './hack', './test', './cli', './bench'],
    message: 'ui/ imports common/ and state/journal/ pure code only.',
  },
  {
    target: './ui',
    from: './state',
    except: ['./journal'],
    message: 'ui/ imports common/ and state/journal/ pure code only.',
  },
  {
    target: './state/journal',
    from: './state/store',
    message: 'state/journal is pure: no storage.',
  },
  {
    target: './state/journal',
    from: './state/server',
    message: 'state/journal is pure: no network.',
  },
];

// The files that stay over the 400-line limit, each with the reason.
const LARGER_FILES = [
  {
    file: 'harness/turn/turn-machine.ts',
    reason:
      'the turn machine is one transition function over one state type, read top to bottom ' +
      '(docs/turns.md); split, its cases would be read out of order',
  },
];

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      'dist/',
      'hack/bin/',
      'proto/gen/',
      'coverage/',
      '**/*.js',
      '**/*.mjs',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { 'import-x': importX },
    settings: { 'import-x/resolver': { typescript: true, node: true } },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': [
        'error',
        { considerDefaultExhaustiveForUnions: true },
      ],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      'import-x/no-cycle': 'error',
      // No barrels: every import names the module that declares it (docs/design.md "Boundaries").
      'no-restricted-syntax': [
        'error',
        {
          selector: 'ExportAllDeclaration, ExportNamedDeclaration[source]',
          message:
            'no re-exports: import from the module that declares it, and make importers do the same.',
        },
      ],
      'import-x/no-restricted-paths': ['error', { zones: [...planeZones, ...pureZones] }],
      'no-console': 'error',
    },
  },
  {
    // common/'s tests may run its adapters against the project's local servers
    // (test/support: for example the Messages API server); common/ itself may not.
    files: ['common/**/*.test.ts'],
    rules: {
      'import-x/no-restricted-paths': [
        'error',
        {
          zones: [
            ...planeZones,
            { target: './common', from: ['./operator', './state', './harness', './hack', './cli'] },
            ...pureZones.slice(1),
          ],
        },
      ],
    },
  },
  {
    // Entry points and developer tools talk to the terminal.
    files: [
      '**/main.ts',
      'hack/**/*.ts',
      'bench/**/*.ts',
      'cli/**/*.ts',
      '**/fixtures/**/*.ts',
      '**/testdata/**/*.ts',
      // A load harness run by hand (npx tsx).
      'test/support/fan-out-harness.ts',
    ],
    rules: { 'no-console': 'off' },
  },
  {
    // The turn machine declares its ports (harness/turn/ports); the model and tool adapters
    // implement them and the server drives it, so imports point inward (docs/design.md).
    // Its tests may run it with the real adapters.
    files: ['harness/turn/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'import-x/no-restricted-paths': [
        'error',
        {
          zones: [
            ...planeZones,
            ...pureZones,
            {
              target: './harness/turn',
              from: ['./harness/server', './harness/model', './harness/tools'],
              message:
                'harness/turn imports none of server/, model/ or tools/: declare what it needs in harness/turn/ports.',
            },
          ],
        },
      ],
    },
  },
  {
    // Small files in every plane, common/, the CLI and the UI (docs/design.md "Boundaries"):
    // the limit finds a file that does too much; split it by responsibility. Tests, test
    // data and generated code are exempt, and so are the files listed below.
    files: [
      'operator/**/*.ts',
      'state/**/*.ts',
      'harness/**/*.ts',
      'common/**/*.ts',
      'cli/**/*.ts',
      'ui/**/*.ts',
    ],
    ignores: ['**/*.test.ts', '**/testdata/**', ...LARGER_FILES.map(({ file }) => file)],
    rules: { 'max-lines': ['error', { max: 400 }] },
  },
  {
    // The turn path, the API layer in front of it and the journal store also keep their
    // functions short (docs/turns.md "Reading the code", docs/design.md "The API layer",
    // state/store/README.md).
    files: [
      'operator/turns/**/*.ts',
      'operator/public-api/**/*.ts',
      'operator/kube-api/**/*.ts',
      'state/store/**/*.ts',
    ],
    ignores: ['**/*.test.ts', '**/testdata/**'],
    rules: { 'max-lines-per-function': ['error', { max: 60 }] },
  },
  {
    files: ['**/*.test.ts', 'test/**/*.ts'],
    rules: {
      '@typescript-eslint/unbound-method': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
);
