// Input the caller must fix: the one refusal of bad input, thrown by every rule a caller's
// input is checked against (the RPC's, the admin API's, the operator commands'). It is the only
// error an entry point answers as the caller's fault, when thrown before the call asked a
// database or by a rule that `needsStored` (src/services/scope.ts, `judgingInput`; otherwise
// a stored value broke the rule): the admin API's 400 `invalid_input` with the sentence as
// `detail`, the RPC's TypeError or RangeError with the sentence as message. Any other error, a
// TypeError from a bug included, is the service's failure: a 500, or the RPC's InternalError,
// with its log line.

export class InvalidInput extends Error {
  override name = "InvalidInput";
  /** The error the RPC throws for this rule, as it always has: a TypeError for a value of the wrong kind, a RangeError for one out of bounds. */
  readonly thrownAs: TypeErrorConstructor | RangeErrorConstructor;

  /**
   * A rule on the caller's input that needs what the database holds (a merge's resulting size):
   * the caller's fault, though raised after a round trip. Every other rule is applied first.
   */
  readonly needsStored: boolean;

  constructor(
    sentence: string,
    thrownAs: TypeErrorConstructor | RangeErrorConstructor = TypeError,
    needsStored = false,
  ) {
    super(sentence);
    this.thrownAs = thrownAs;
    this.needsStored = needsStored;
  }
}
