"""The TensorDict keys every text environment writes and the library reads."""

GOAL_ID_KEY = "goal_id"
ACTION_MASK_KEY = "action_mask"
#: The text an environment's renderer writes and the LLM scorer reads: a prompt per state, and the
#: candidate actions (a list of str per state).
PROMPT_KEY, ACTIONS_KEY = "prompt", "actions"
#: The social partner's reports of a step: goal ids padded with -1 to a fixed width, and how many.
ACHIEVED_GOAL_IDS_KEY = "achieved_goal_ids"
ACHIEVED_GOAL_COUNT_KEY = "achieved_goal_count"
#: A step key of the environments whose episodes can end whatever their goal (a game won or lost):
#: True in the state after such an end. A failure hindsight relabels there ends with a terminal,
#: not a truncation (there is no state to bootstrap from: the game is over).
GAME_OVER_KEY = "game_over"

__all__ = [
    "ACHIEVED_GOAL_COUNT_KEY",
    "ACHIEVED_GOAL_IDS_KEY",
    "ACTIONS_KEY",
    "ACTION_MASK_KEY",
    "GAME_OVER_KEY",
    "GOAL_ID_KEY",
    "PROMPT_KEY",
]
