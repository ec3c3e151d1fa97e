// One jest run, two projects: unit tests sit beside the code (*.test.ts) and need nothing
// running; integration tests (test/integration) share ONE local control plane that the
// global setup starts before any test file runs and the teardown stops after the last.
/** @type {import('jest').Config['transform']} */
const transform = { '^.+\\.(t|j)sx?$': ['@swc/jest', { jsc: { target: 'es2022' } }] };
// @noble/* 2.x ship ESM only; let swc turn them into CommonJS for jest.
const transformIgnorePatterns = ['/node_modules/(?!@noble/)'];

/** @type {import('jest').Config} */
module.exports = {
  projects: [
    {
      displayName: 'unit',
      testMatch: ['<rootDir>/{common,operator,state,harness,hack,cli}/**/*.test.ts'],
      transform,
      transformIgnorePatterns,
      testEnvironment: 'node',
    },
    {
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      transform,
      transformIgnorePatterns,
      testEnvironment: 'node',
      globalSetup: '<rootDir>/test/integration/global-setup.ts',
      globalTeardown: '<rootDir>/test/integration/global-teardown.ts',
      testTimeout: 60000,
    },
  ],
};
