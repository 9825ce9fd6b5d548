import type { Context } from "hono";
import type { Refusal } from "../domain/refusal.ts";
import { ApiError, reauthenticationRequired, sessionInvalid, supportRefused, unauthorized } from "./errors.ts";
import type { ScopedEnv } from "./middleware/scope.ts";

/**
 * What a route's contract answers for a token that proves no live session: the list, the delete,
 * the events and device binding 401 `invalid_token`; `DELETE /auth/logout` 401
 * `session_invalid`; `POST /auth/logout` 400 `session_invalid`.
 */
export type DeadToken = "invalid_token" | "session_invalid" | "session_invalid_400";

/** A device-binding proof that is missing, malformed or over another challenge: a refused credential. */
export const invalidProof = () => new ApiError(400, "device_proof_invalid", { authFailure: true });

/** The one place a service's refusal becomes the HTTP answer (RFC 9470's challenge for step-up). */
export function refused<E extends ScopedEnv>(
  c: Context<E>,
  refusal: Refusal,
  dead: DeadToken = "invalid_token",
): ApiError {
  switch (refusal) {
    case "not_live":
      return dead === "session_invalid_400" ? sessionInvalid() : unauthorized(dead, true);
    case "step-up":
      return reauthenticationRequired(c.var.scope.config.stepUpMaxAgeSeconds);
    case "support":
      return supportRefused();
    case "id_required":
      return new ApiError(400, "session_id_required");
    case "not_yours":
      return unauthorized("not_authorized", false);
    case "already_bound":
      return new ApiError(409, "device_already_bound");
    case "wrong_challenge":
      return invalidProof();
  }
}
