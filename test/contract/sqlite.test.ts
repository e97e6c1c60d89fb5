import { describe } from "vitest";
import { sqliteKind } from "../helpers/stores.js";
import { storeContract } from "./store-contract.js";

describe("SQLite store", () => storeContract(sqliteKind));
