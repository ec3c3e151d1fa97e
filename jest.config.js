// One jest run, two projects: unit tests sit beside the code (*.test.ts) and need nothing
// running; integration tests (test/integration) share ONE local control plane that the
// global setup starts before any test file runs and the teardown stops after the last.
/** @type {import('jest').Config['transform']} */
const transform = { '^.+\\.(t|j)sx?$': ['@swc/jest', { jsc: { target: 'es2022' } }] };
// @noble/* 2.x, @kubernetes/client-node 1.x (with its OIDC deps) and mppx (with its
// structured-headers) ship ESM only; Node 20.19 can require() them, but jest's loader
// cannot: let swc turn them into CommonJS.
const transformIgnorePatterns = [
  '/node_modules/(?!(@noble|@kubernetes/client-node|openid-client|oauth4webapi|jose|mppx|structured-headers)/)',
];

/** @type {import('jest').Config} */
module.exports = {
  projects: [
    {
      displayName: 'unit',
      testMatch: [
        '<rootDir>/{common,operator,state,harness,hack,cli,ui}/**/*.test.ts',
        // Test doubles that need nothing running (the Messages API server, MCP servers).
        '<rootDir>/test/support/**/*.test.ts',
      ],
      transform,
      transformIgnorePatterns,
      testEnvironment: 'node',
      // The harness CA of the in-process harnesses (test/support/harness-tls.ts).
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
    },
    {
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      transform,
      transformIgnorePatterns,
      testEnvironment: 'node',
      globalSetup: '<rootDir>/test/integration/global-setup.ts',
      globalTeardown: '<rootDir>/test/integration/global-teardown.ts',
      setupFilesAfterEnv: ['<rootDir>/test/integration/setup-timeout.ts'],
    },
  ],
};
