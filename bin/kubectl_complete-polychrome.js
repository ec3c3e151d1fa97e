#!/usr/bin/env node
'use strict';
// Launcher for `kubectl_complete-polychrome`, the plugin's shell completion (docs/kubectl.md).
require('./launch')('kubectl-complete-polychrome', 'kubectl_complete-polychrome');
