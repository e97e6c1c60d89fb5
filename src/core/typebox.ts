// Every module of taskpool takes TypeBox from here, not from @sinclair/typebox: the build replaces
// this file's compiled copy with TypeBox bundled into one module (scripts/bundle-typebox.js). Its
// package is 218 ES modules, and loading them was about a third of every process's start (the CLI,
// a worker, the server).
export * from "@sinclair/typebox";
export { TypeCompiler, type ValueError, ValueErrorType } from "@sinclair/typebox/compiler";
export { Value } from "@sinclair/typebox/value";
