/*
 * The forms of `--what-if CHANGE` (cli/journal-what-if.ts parses them), apart from the
 * what-if code so the usage can name them without loading it.
 */

/** The forms of CHANGE, for usage text and errors. */
export const WHAT_IF_FORMS = `CHANGE is one of:
    tool-result@POS=TEXT      the tool result at journal position POS had content TEXT
    tool-error@POS=TEXT       ... was an error with message TEXT
    model-output@POS=TEXT     the model call at POS answered the text TEXT
    model-blocks@POS=JSON     ... answered these blocks: [{"type":"text","text":...},
                              {"type":"tool_use","id":...,"name":...,"input":{...}}]
    approval@REQUEST-ID=approve|deny   the approval was answered the other way
    max-steps=N               every configuration had a step budget of N
    system-prompt=TEXT        every configuration had this system prompt
    model=NAME                every configuration named this model
    summary@POS=TEXT          the summary at journal position POS had text TEXT (every
                              attempt given it gets TEXT in its system prompt)
    handoff@TOOL-CALL-ID=AGENT   that __handoff_to call named agent AGENT
    delegate@TOOL-CALL-ID=AGENT  that __delegate_to call (alone or one of a panel's) asked
                              agent AGENT, one its agent may delegate to
    TEXT or JSON may be @FILE, to read it from a file.`;
