#!/usr/bin/env node
import "../dist/cli/index.js";
