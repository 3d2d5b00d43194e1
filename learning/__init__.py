"""The learning loop: the sandbox as an environment people train kernel-writing models against.

- :mod:`learning.tasks`: tasks (``cuda-agent.task/1``), content-hashed and named ``name@hash``.
- :mod:`learning.completion`: the prompt for a task, and a completion back to a candidate
  (a fenced block or a tool call) or a clear "no code" verdict.
- :mod:`learning.engine`: scoring batches of completions through any executor: grouped per
  task into one sandbox request, identical completions evaluated once, deadlines, re-timing.
- :mod:`learning.service`: ``cuda-agent reward serve``, the engine over HTTP (the ``worker`` extra).
- :mod:`learning.client`: thin adapters for TRL, verl and OpenRLHF over that HTTP service.

The reward itself is one function, :func:`agent.trajectory.reward` (its version
:data:`agent.trajectory.REWARD_VERSION`), shared with the optimize loop's trajectories.

The reward service is a client of the sandbox, like the optimize loop: completions are untrusted
text that only ever reaches the sandbox inside an ``EvalRequest``; nothing here compiles or runs them.
"""
