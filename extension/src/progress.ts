// The server's work-done progress as VS Code shows it: absolute percentages become increments.

export interface WorkDoneValue {
  message?: string;
  percentage?: number;
}

export interface ProgressStep {
  message?: string;
  increment?: number;
}

/** VS Code's progress adds up increments; LSP reports absolute percentages (never going back). */
export class ProgressSteps {
  private reported = 0;

  step(value: WorkDoneValue): ProgressStep {
    const step: ProgressStep = {};
    if (value.message !== undefined) {
      step.message = value.message;
    }
    if (typeof value.percentage === "number" && Number.isFinite(value.percentage)) {
      const percent = Math.max(0, Math.min(100, value.percentage));
      step.increment = Math.max(0, percent - this.reported);
      this.reported += step.increment;
    }
    return step;
  }
}
