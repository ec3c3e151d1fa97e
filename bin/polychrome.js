#!/usr/bin/env node
'use strict';
// Launcher for `polychrome` (bin/launch.js).
require('./launch')('polychrome', 'polychrome');
