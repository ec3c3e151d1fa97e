import { jest } from '@jest/globals';

// Integration tests wait on a real API server and controllers on 2 shared cores.
jest.setTimeout(60_000);
