;;; eglot_flow.el --- Emacs + eglot (1.9+, no other packages) driving `cuda-agent serve' in batch mode -*- lexical-binding: t -*-
;; A long Optimize (progress arrives as log and echo-area messages: eglot 1.9 has no work-done
;; progress), its result applied through the "Apply verified rewrite" code action with eglot's
;; one confirmation of a server edit, then a second Optimize cancelled by command.
;; Run by tests/test_editors.py: emacs --batch -l eglot_flow.el (no user init; site-start loads
;; Debian's elpa-eglot).
;; Environment: CUDA_AGENT_FILE, CUDA_AGENT_PYTHON, CUDA_AGENT_OUT (JSON result).
(require 'eglot)
(require 'json)
(require 'cl-lib)

(defvar flow-log nil)
(defvar flow-messages nil)
(defvar flow-finished (make-hash-table :test 'equal))
(defvar flow-confirmations 0)

(cl-defmethod eglot-handle-notification :before (_server (_method (eql window/logMessage)) &key _type message)
  (push message flow-log))
(cl-defmethod eglot-handle-notification :before (_server (_method (eql window/showMessage)) &key _type message)
  (push message flow-messages))
(cl-defmethod eglot-handle-notification (_server (_method (eql cudaAgent/runFinished)) &rest params)
  (puthash (plist-get params :runId) params flow-finished))

(defun flow-wait (seconds what pred)
  (let ((deadline (+ (float-time) seconds)))
    (while (not (funcall pred))
      (when (> (float-time) deadline) (error "timed out waiting for %s" what))
      (accept-process-output nil 0.05))))

(defun flow-main ()
  (let* ((file (getenv "CUDA_AGENT_FILE"))
         (dir (file-name-directory file))
         (out nil)
         (eglot-sync-connect 60)
         (eglot-connect-timeout 60))
    (add-hook 'project-find-functions (lambda (_) (cons 'transient dir))) ; the folder is the project
    (find-file file)
    (c++-mode)
    (eglot '(c++-mode) (project-current) 'eglot-lsp-server
           (list (getenv "CUDA_AGENT_PYTHON") "-m" "server" "serve") "cuda")
    (flow-wait 60 "eglot to connect" #'eglot-current-server)
    (let* ((server (eglot-current-server))
           (uri (eglot--path-to-uri file))
           (ref (vector (list :uri uri :kernel "saxpy")))
           (t0 (float-time))
           (started (eglot-execute-command server 'cudaAgent.optimize ref)))
      (setq out (list :started started :answered_s (- (float-time) t0)))
      ;; 1. a long Optimize
      (flow-wait 120 "the optimize run" (lambda () (gethash (plist-get started :runId) flow-finished)))
      (setq out (append out (list :optimize_s (- (float-time) t0)
                                  :finished (gethash (plist-get started :runId) flow-finished))))
      ;; 2. apply it: the code action on the kernel; eglot asks once before a server edit
      (goto-char (point-min))
      (search-forward "void saxpy(")
      (let* ((line (1- (line-number-at-pos)))
             (pos (list :line line :character 0))
             (actions (jsonrpc-request server :textDocument/codeAction
                                       (list :textDocument (list :uri uri)
                                             :range (list :start pos :end pos)
                                             :context (list :diagnostics []))))
             (apply (plist-get (aref actions 0) :command)))
        (cl-letf (((symbol-function 'y-or-n-p) (lambda (&rest _) (cl-incf flow-confirmations) t)))
          (setq out (append out (list :actions (mapcar (lambda (a) (plist-get a :title)) actions)
                                      :applied (eglot-execute-command server (plist-get apply :command)
                                                                      (plist-get apply :arguments))))))
        (flow-wait 10 "the edit" (lambda () (save-excursion (goto-char (point-min)) (search-forward "__restrict__" nil t))))
        ;; what eglot's idle timer does in an interactive Emacs (idle timers never fire in batch mode):
        ;; the server learns of the edit, and the next Optimize works on the rewritten kernel
        (eglot--signal-textDocument/didChange)
        (setq out (append out (list :text (buffer-substring-no-properties (point-min) (point-max))
                                    :modified (if (buffer-modified-p) t :json-false)
                                    :confirmations flow-confirmations))))
      ;; 3. another Optimize, cancelled by command once progress has been logged
      (let* ((logged (length flow-log))
             (second (eglot-execute-command server 'cudaAgent.optimize ref)))
        (flow-wait 30 "progress of the second run"
                   (lambda () (cl-some (lambda (m) (string-match-p "Optimizing saxpy: [0-9]+%" m))
                                       (butlast flow-log logged))))
        (setq out (append out (list :cancel (eglot-execute-command server 'cudaAgent.cancel
                                                                    (vector (list :runId (plist-get second :runId)))))))
        (flow-wait 30 "the cancelled run" (lambda () (gethash (plist-get second :runId) flow-finished)))
        (setq out (append out (list :cancelled (gethash (plist-get second :runId) flow-finished)))))
      (setq out (append out (list :log (vconcat (reverse flow-log)) :messages (vconcat (reverse flow-messages)))))
      (eglot-shutdown server))
    out))

(let ((result (condition-case err (flow-main)
                (error (list :error (error-message-string err)
                             :log (vconcat (reverse flow-log)) :messages (vconcat (reverse flow-messages)))))))
  (with-temp-file (getenv "CUDA_AGENT_OUT")
    (insert (json-encode result)))
  (kill-emacs (if (plist-get result :error) 1 0)))
