"""Experience into memory, with a model or a person in the loop: lessons from traces, error
signatures, distilled patterns, the curator and the drafts people confirm."""
