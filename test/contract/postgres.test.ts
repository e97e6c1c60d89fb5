import { describe } from "vitest";
import { postgresKind } from "../helpers/stores.js";
import { storeContract } from "./store-contract.js";

describe("PostgreSQL store", () => storeContract(postgresKind));
