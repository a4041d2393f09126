"""Search-R1's exact strings, typed by hand (never imported from the package), shared by the protocol tests."""

# From docs/design/conventions.md / Search-R1's nq_search.py and generation.py.
PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every "
    "time you get new information. After reasoning, if you find you lack some knowledge, you can call "
    "a search engine by <search> query </search> and it will return the top searched results between "
    "<information> and </information>. You can search as many times as your want. If you find no "
    "further external knowledge needed, you can directly provide the answer inside <answer> and "
    "</answer>, without detailed illustrations. For example, <answer> Beijing </answer>. "
    "Question: what is the capital of france?\n"
)
INVALID = ("\nMy previous action is invalid. If I want to search, I should put the query between "
           "<search> and </search>. If I want to give the final answer, I should put the answer "
           "between <answer> and </answer>. Let me try again.\n")
OBS_1 = ('\n\n<information>Doc 1(Title: "Paris") Paris is the capital of France.\nIt lies on the Seine.\n'
         'Doc 2(Title: "France") France is a country in Europe. Its capital is Paris.\n'
         'Doc 3(Title: "Berlin") Berlin is the capital of Germany.</information>\n\n')
