#!/usr/bin/env node
'use strict';
// Launcher for the kubectl plugin `kubectl-polychrome` (bin/launch.js, docs/kubectl.md).
require('./launch')('kubectl-polychrome', 'kubectl-polychrome');
